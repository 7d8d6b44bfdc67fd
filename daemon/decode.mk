# placeholder until the decoder lands (owned by the decoder work)
noinst_LTLIBRARIES += daemon/libcuptimon-decode.la
daemon_libcuptimon_decode_la_SOURCES =
daemon_libcuptimon_decode_la_CFLAGS = $(AM_CFLAGS) $(JSONC_CFLAGS) $(ZSTD_CFLAGS)
daemon_libcuptimon_decode_la_LIBADD = $(JSONC_LIBS) $(IBERTY_LIBS) $(ZSTD_LIBS)
