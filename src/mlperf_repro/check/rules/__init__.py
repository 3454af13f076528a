"""The checker's rules, one module per record they read; each registers its rules on
:data:`mlperf_repro.check.model.RULES` when imported. Importing this package imports every
module in it, so a new module of rules is one file here."""

import importlib
import pkgutil

for _module in sorted(info.name for info in pkgutil.iter_modules(__path__)):
    importlib.import_module(f"{__name__}.{_module}")
