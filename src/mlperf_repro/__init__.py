"""mlperf_repro: regenerate a complete MLPerf Inference submission from one config.

The Snakemake workflow (``Snakefile``, ``workflow/rules``) only wires stages together;
every piece of logic lives in this package so it can be imported and unit-tested
without Snakemake.
"""

__version__ = "0.1.0"
