# The shim loaded into jobs.  Only the cuptimon_* API and the driver's
# InitializeInjection hook are exported.
lib_LTLIBRARIES += client-lib/libcuptimon.la
pkginclude_HEADERS += client-lib/cuptimon.h
noinst_HEADERS += client-lib/shim.h
client_lib_libcuptimon_la_SOURCES = client-lib/shim.c client-lib/io.c
client_lib_libcuptimon_la_CFLAGS = $(AM_CFLAGS) $(VIS_CFLAGS) $(JSONC_CFLAGS)
client_lib_libcuptimon_la_LIBADD = proto/libcuptimon-proto.la $(JSONC_LIBS) -ldl
client_lib_libcuptimon_la_LDFLAGS = $(AM_LDFLAGS) -version-info 0:0:0 -no-undefined \
	-export-symbols-regex '^(cuptimon_[a-z]|InitializeInjection$$)'
pkgconfigdir = $(libdir)/pkgconfig
pkgconfig_DATA = client-lib/cuptimon.pc
