# The shim loaded into jobs.  Exported: the cuptimon_* API, the driver's
# InitializeInjection hook, and the CUPTI activity entry points that other
# tools call (mux.c), which interpose only when the shim is preloaded.
lib_LTLIBRARIES += client-lib/libcuptimon.la
pkginclude_HEADERS += client-lib/cuptimon.h
noinst_HEADERS += client-lib/shim.h
client_lib_libcuptimon_la_SOURCES = client-lib/shim.c client-lib/io.c client-lib/lost.c client-lib/mux.c \
	client-lib/v2.c client-lib/v2-fields.c client-lib/v2-fields.h \
	client-lib/hook.c client-lib/ranges.c client-lib/held.c client-lib/nccl.c \
	client-lib/mpq.c client-lib/mpq.h
client_lib_libcuptimon_la_CFLAGS = $(AM_CFLAGS) $(VIS_CFLAGS) $(JSONC_CFLAGS)
client_lib_libcuptimon_la_LIBADD = proto/libcuptimon-proto.la $(SHIM_JSONC_LIBS) -ldl
client_lib_libcuptimon_la_LDFLAGS = $(AM_LDFLAGS) -version-info 0:0:0 -no-undefined \
	-export-symbols-regex '^(cuptimon_[a-z]|InitializeInjection$$|cuptiActivityRegisterCallbacks$$|cuptiActivityEnable$$|cuptiActivityDisable$$|cuptiActivityFlushAll$$|cuptiActivityRegisterTimestampCallback$$|cuptiFinalize$$|ncclProfiler_v[1-6]$$)'
pkgconfigdir = $(libdir)/pkgconfig
pkgconfig_DATA = client-lib/cuptimon.pc
