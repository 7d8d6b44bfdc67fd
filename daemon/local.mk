# cuptimond, and its internal library: the configuration file, archive
# retention, the log, the live aggregates and the set of ids a trace window
# keeps.  They are a library only so that their unit suites link them
# without main(); nothing outside the daemon and its tests uses it.
noinst_LTLIBRARIES += daemon/libcuptimond-core.la
daemon_libcuptimond_core_la_SOURCES = \
	daemon/conf.c daemon/conf.h \
	daemon/retention.c daemon/retention.h \
	daemon/log.c daemon/log.h \
	daemon/idset.c daemon/idset.h \
	daemon/aggregate.c daemon/aggregate.h daemon/aggregate-int.h \
	daemon/aggregate-query.c daemon/aggregate-prom.c
# The configuration's default path is SYSCONFDIR/cuptimon/cuptimond.conf.
daemon_libcuptimond_core_la_CFLAGS = $(AM_CFLAGS) $(JSONC_CFLAGS) -DSYSCONFDIR='"$(sysconfdir)"'
daemon_libcuptimond_core_la_LIBADD = $(JSONC_LIBS)

# What a program that links the daemon's library adds to its LDADD.
DAEMON_CORE_LIBS = daemon/libcuptimond-core.la $(ARCHIVE_LIBS)

sbin_PROGRAMS += daemon/cuptimond
noinst_HEADERS += daemon/daemon.h
daemon_cuptimond_SOURCES = daemon/main.c daemon/conn.c daemon/session.c daemon/session-layout.c daemon/session-held.c daemon/gpm.c daemon/gpm.h daemon/gpm-cupti.h \
	daemon/control.c \
	daemon/flush.c daemon/window.c daemon/window-write.c daemon/window-write.h \
	daemon/lossreport.c
daemon_cuptimond_CFLAGS = $(AM_CFLAGS) $(LIBUV_CFLAGS) $(JSONC_CFLAGS) $(SYSTEMD_CFLAGS)
daemon_cuptimond_LDADD = $(DAEMON_CORE_LIBS) $(LIBUV_LIBS) $(SYSTEMD_LIBS) -ldl
# Where a window's trace may go, and writing it for the user who asked.
daemon_cuptimond_SOURCES += daemon/window-output.c daemon/window-output.h
# The GPU metrics the daemon knows and the judgement of a set (issue 48),
# shared by the configuration check and the sampler.
daemon_libcuptimond_core_la_SOURCES += daemon/gpm-set.c daemon/gpm-set.h
