# libcuptimon-archive: the archive format and everything that reads it,
# shared by cuptimond (which writes archives and window traces) and
# cuptimonctl (which decodes them offline): the segment writer/reader, CUPTI
# record layouts and the buffer walker, the producer string table, cached
# demangling, typed getters for JSON members, the session reader (one
# session's meta.json and strings), runtime/driver API names (generated from
# the CUPTI headers), the streaming Chrome trace writer and the per-trace
# summary.  It depends only on proto/.
noinst_LTLIBRARIES += archive/libcuptimon-archive.la
archive_libcuptimon_archive_la_SOURCES = \
	archive/archive.c archive/archive.h \
	archive/decode.c archive/decode.h \
	archive/strtab.c archive/strtab.h \
	archive/demangle.c archive/demangle.h \
	archive/json-get.c archive/json-get.h \
	archive/session.c archive/session.h \
	archive/cbid.h archive/hash.h \
	archive/trace.c archive/trace.h \
	archive/summary.c archive/summary.h \
	archive/utf8.c archive/utf8.h
nodist_archive_libcuptimon_archive_la_SOURCES = archive/cbid-names.c
archive_libcuptimon_archive_la_CFLAGS = $(AM_CFLAGS) $(JSONC_CFLAGS) $(ZSTD_CFLAGS) $(ZLIB_CFLAGS)
archive_libcuptimon_archive_la_LIBADD = $(JSONC_LIBS) $(IBERTY_LIBS) $(ZSTD_LIBS) $(ZLIB_LIBS)
if FUZZING
# The fuzz targets (tests/fuzz) want coverage instrumentation in the code
# they exercise.
archive_libcuptimon_archive_la_CFLAGS += $(FUZZ_CFLAGS)
endif

# What a program that links the archive library adds to its LDADD (convenience
# libraries are listed here, in link order, rather than in each other's LIBADD,
# which would copy proto's objects into every library above it).
ARCHIVE_LIBS = archive/libcuptimon-archive.la proto/libcuptimon-proto.la \
	$(JSONC_LIBS) $(ZSTD_LIBS) $(ZLIB_LIBS) $(IBERTY_LIBS)

# Runtime and driver API names by callback id, generated from the CUPTI
# headers that configure found (the -I directories of CUDA_CFLAGS, then
# $(CUDA_DIR)/include), so they always match the CUPTI we build against.
CUPTIMON_CUPTI_INCDIRS = $(patsubst -I%,%,$(filter -I%,$(CUDA_CFLAGS))) $(CUDA_DIR)/include
CUPTIMON_RUNTIME_CBID_H = $(firstword $(wildcard $(addsuffix /cupti_runtime_cbid.h,$(CUPTIMON_CUPTI_INCDIRS))) $(CUDA_DIR)/include/cupti_runtime_cbid.h)
CUPTIMON_DRIVER_CBID_H = $(firstword $(wildcard $(addsuffix /cupti_driver_cbid.h,$(CUPTIMON_CUPTI_INCDIRS))) $(CUDA_DIR)/include/cupti_driver_cbid.h)

archive/cbid-names.c: $(top_srcdir)/archive/gen-cbid.sh $(CUPTIMON_RUNTIME_CBID_H) $(CUPTIMON_DRIVER_CBID_H)
	$(AM_V_GEN)$(MKDIR_P) archive && \
	$(SHELL) $(top_srcdir)/archive/gen-cbid.sh $(CUPTIMON_RUNTIME_CBID_H) $(CUPTIMON_DRIVER_CBID_H) >$@.tmp && \
	mv -f $@.tmp $@
CLEANFILES += archive/cbid-names.c archive/cbid-names.c.tmp
EXTRA_DIST += archive/gen-cbid.sh
