bin_PROGRAMS += cli/cuptimonctl
noinst_HEADERS += cli/cli.h
cli_cuptimonctl_SOURCES = cli/main.c cli/merge.c $(CLI_DECODE_SOURCES)
cli_cuptimonctl_CFLAGS = $(AM_CFLAGS) $(JSONC_CFLAGS)
cli_cuptimonctl_LDADD = daemon/libcuptimon-decode.la proto/libcuptimon-proto.la \
	$(JSONC_LIBS) $(ZSTD_LIBS) $(IBERTY_LIBS)
