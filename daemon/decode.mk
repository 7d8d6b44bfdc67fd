# The decoder library shared by cuptimond and cuptimonctl: CUPTI record
# layouts and the buffer walker, the producer string table, cached
# demangling, runtime/driver API names (generated from the CUPTI headers),
# the streaming Chrome trace writer and the per-trace summary.  The archive
# reader is appended to the same library in daemon/local.mk.
noinst_LTLIBRARIES += daemon/libcuptimon-decode.la
daemon_libcuptimon_decode_la_SOURCES = \
	daemon/decode.c daemon/decode.h \
	daemon/strtab.c daemon/strtab.h \
	daemon/demangle.c daemon/demangle.h \
	daemon/cbid.h \
	daemon/trace.c daemon/trace.h \
	daemon/summary.c daemon/summary.h
nodist_daemon_libcuptimon_decode_la_SOURCES = daemon/cbid-names.c
daemon_libcuptimon_decode_la_CFLAGS = $(AM_CFLAGS) $(JSONC_CFLAGS) $(ZSTD_CFLAGS)
daemon_libcuptimon_decode_la_LIBADD = $(JSONC_LIBS) $(IBERTY_LIBS) $(ZSTD_LIBS)

# Runtime and driver API names by callback id, generated from the CUPTI
# headers that configure found (the -I directories of CUDA_CFLAGS, then
# $(CUDA_DIR)/include), so they always match the CUPTI we build against.
CUPTIMON_CUPTI_INCDIRS = $(patsubst -I%,%,$(filter -I%,$(CUDA_CFLAGS))) $(CUDA_DIR)/include
CUPTIMON_RUNTIME_CBID_H = $(firstword $(wildcard $(addsuffix /cupti_runtime_cbid.h,$(CUPTIMON_CUPTI_INCDIRS))) $(CUDA_DIR)/include/cupti_runtime_cbid.h)
CUPTIMON_DRIVER_CBID_H = $(firstword $(wildcard $(addsuffix /cupti_driver_cbid.h,$(CUPTIMON_CUPTI_INCDIRS))) $(CUDA_DIR)/include/cupti_driver_cbid.h)

daemon/cbid-names.c: $(top_srcdir)/daemon/gen-cbid.sh $(CUPTIMON_RUNTIME_CBID_H) $(CUPTIMON_DRIVER_CBID_H)
	$(AM_V_GEN)$(MKDIR_P) daemon && \
	$(SHELL) $(top_srcdir)/daemon/gen-cbid.sh $(CUPTIMON_RUNTIME_CBID_H) $(CUPTIMON_DRIVER_CBID_H) >$@.tmp && \
	mv -f $@.tmp $@
CLEANFILES += daemon/cbid-names.c daemon/cbid-names.c.tmp
EXTRA_DIST += daemon/gen-cbid.sh

# cuptimonctl decode (cli/local.mk adds these to cuptimonctl).
CLI_DECODE_SOURCES = cli/decode.c cli/decode.h
