# systemd units (socket activation and sd_notify arrive with the service work).
systemdsystemunit_DATA = systemd/cuptimond.service
EXTRA_DIST += systemd/cuptimond.service.in
CLEANFILES += systemd/cuptimond.service
systemd/cuptimond.service: $(srcdir)/systemd/cuptimond.service.in Makefile
	$(AM_V_GEN)$(MKDIR_P) systemd && sed -e 's|@sbindir[@]|$(sbindir)|g' $< > $@
