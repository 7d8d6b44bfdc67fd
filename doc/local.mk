# Manual pages, in roff: the daemon, its configuration file, the CLI and
# the shim.  Each renders without a warning: groff -man -Tutf8 -ww -z.
dist_man_MANS += doc/cuptimond.8 doc/cuptimond.conf.5 doc/cuptimonctl.1 doc/libcuptimon.7
