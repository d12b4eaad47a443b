"""The report page's sections, one module per section (or family of figure sections): each
builds its blocks from the :class:`~alphagate.report.inputs.ReportInputs`, and
:mod:`alphagate.report.page` puts them in the order a reader decides."""
