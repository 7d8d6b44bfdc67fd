# cuptimonctl: the control client (status, flush, windows, reload), live
# top and metrics, merging node traces, and offline decode and statistics of
# an archive.
# It links the archive library and proto, nothing of the daemon.
bin_PROGRAMS += cli/cuptimonctl
noinst_HEADERS += cli/cli.h cli/ctl.h cli/read.h cli/top.h
cli_cuptimonctl_SOURCES = cli/main.c cli/ctl.c cli/merge.c cli/decode.c cli/read.c cli/top.c \
                          cli/stats.c cli/gpumetrics.c cli/export.c
cli_cuptimonctl_CFLAGS = $(AM_CFLAGS) $(JSONC_CFLAGS) $(SQLITE3_CFLAGS)
cli_cuptimonctl_LDADD = $(ARCHIVE_LIBS) $(SQLITE3_LIBS)
