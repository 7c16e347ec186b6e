"""Settings: the run's configuration schema and its store keys, component options, the registries of plugins,
reading experiment files and ``--set`` overrides, and the shipped presets. The first step of the pipeline
(config -> runner -> store -> tradeoff -> reports).

May import: common.
"""
