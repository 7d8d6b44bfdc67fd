# The daemon, and the internal library (archive, decoder, trace writer)
# that cuptimond and cuptimonctl share.
include daemon/decode.mk
daemon_libcuptimon_decode_la_SOURCES += daemon/archive.c daemon/archive.h daemon/log.c daemon/log.h

sbin_PROGRAMS += daemon/cuptimond
noinst_HEADERS += daemon/daemon.h
daemon_cuptimond_SOURCES = daemon/main.c daemon/conn.c daemon/session.c daemon/control.c \
	daemon/window.c daemon/window-write.c daemon/window-write.h
daemon_cuptimond_CFLAGS = $(AM_CFLAGS) $(LIBUV_CFLAGS) $(JSONC_CFLAGS) $(SYSTEMD_CFLAGS)
daemon_cuptimond_LDADD = daemon/libcuptimon-decode.la proto/libcuptimon-proto.la \
	$(LIBUV_LIBS) $(JSONC_LIBS) $(ZSTD_LIBS) $(SYSTEMD_LIBS)
