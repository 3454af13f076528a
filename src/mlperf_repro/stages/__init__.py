"""Stage entry points: what ``scripts/*.py`` call, one module per workflow stage.

They sit above the task registry (``mlperf_repro.tasks``), which they ask for a benchmark's
dataset reader, SUT and evaluator, and so above ``harness``, ``accuracy`` and ``compliance``,
whose pieces the registry and the stages put together (docs/architecture.md):

- :mod:`.runs`: one LoadGen test (``loadgen_job``) and the unquantized reference run
  (``reference_accuracy_job``);
- :mod:`.accuracy`: score an accuracy run and judge it (``accuracy_job``, ``score_log``);
- :mod:`.compliance`: verify a compliance run into its TEST0x folder (``verify_job``).
"""
