# systemd units for running cuptimond as a node service:
#   cuptimond.service   Type=notify with a watchdog, reload through
#                       cuptimonctl, sandboxed (see cuptimond(8));
#   cuptimond.socket    socket activation of the producer and control sockets;
#   sysusers.d and tmpfiles.d snippets for the cuptimon group and /run/cuptimon.
# The service is generated from its .in so that it names the configured
# sbindir and bindir.  Without libsystemd the daemon can neither take
# systemd's sockets nor notify it, so the lines marked @SD@ (socket
# activation, Type=notify's watchdog) are dropped, Type becomes simple and
# the socket unit is not installed.
nodist_systemdsystemunit_DATA = systemd/cuptimond.service
EXTRA_DIST += systemd/cuptimond.service.in systemd/cuptimond.socket \
	systemd/cuptimon.sysusers systemd/cuptimon.tmpfiles
if HAVE_SYSTEMD
dist_systemdsystemunit_DATA = systemd/cuptimond.socket
CUPTIMON_UNIT_SD = -e '/^\#@/d' -e 's|^@SD[@]||' -e 's|@SERVICE_TYPE[@]|notify|g'
else
CUPTIMON_UNIT_SD = -e '/^\#@/d' -e '/^@SD[@]/d' -e 's|@SERVICE_TYPE[@]|simple|g'
endif

# systemd looks for these by their .conf names.
sysusersdir = $(prefix)/lib/sysusers.d
nodist_sysusers_DATA = systemd/sysusers.d/cuptimon.conf
tmpfilesdir = $(prefix)/lib/tmpfiles.d
nodist_tmpfiles_DATA = systemd/tmpfiles.d/cuptimon.conf

systemd/cuptimond.service: $(srcdir)/systemd/cuptimond.service.in Makefile
	$(AM_V_GEN)$(MKDIR_P) systemd && \
	sed -e 's|@sbindir[@]|$(sbindir)|g' -e 's|@bindir[@]|$(bindir)|g' $(CUPTIMON_UNIT_SD) \
	  $(srcdir)/systemd/cuptimond.service.in >$@.tmp && mv -f $@.tmp $@
systemd/sysusers.d/cuptimon.conf: $(srcdir)/systemd/cuptimon.sysusers
	$(AM_V_GEN)$(MKDIR_P) systemd/sysusers.d && cat $(srcdir)/systemd/cuptimon.sysusers >$@
systemd/tmpfiles.d/cuptimon.conf: $(srcdir)/systemd/cuptimon.tmpfiles
	$(AM_V_GEN)$(MKDIR_P) systemd/tmpfiles.d && cat $(srcdir)/systemd/cuptimon.tmpfiles >$@

# Copies for tests/unit/systemd-verify.sh: the same units, pointing at the
# programs of this build tree, which systemd-analyze verify wants to exist.
SYSTEMD_TEST_UNITS = systemd/test/cuptimond.service systemd/test/cuptimond.socket
systemd/test/cuptimond.service: $(srcdir)/systemd/cuptimond.service.in Makefile
	$(AM_V_GEN)$(MKDIR_P) systemd/test && \
	sed -e 's|@sbindir[@]|$(abs_top_builddir)/daemon|g' \
	  -e 's|@bindir[@]|$(abs_top_builddir)/cli|g' $(CUPTIMON_UNIT_SD) \
	  $(srcdir)/systemd/cuptimond.service.in >$@.tmp && mv -f $@.tmp $@
systemd/test/cuptimond.socket: $(srcdir)/systemd/cuptimond.socket
	$(AM_V_GEN)$(MKDIR_P) systemd/test && cat $(srcdir)/systemd/cuptimond.socket >$@

CLEANFILES += systemd/cuptimond.service systemd/cuptimond.service.tmp \
	systemd/sysusers.d/cuptimon.conf systemd/tmpfiles.d/cuptimon.conf \
	$(SYSTEMD_TEST_UNITS) systemd/test/cuptimond.service.tmp
