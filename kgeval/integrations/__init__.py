"""Drop-ins: kgeval inside other libraries' machinery -- PyKEEN's evaluator classes for its pipeline, stopper, HPO
and evaluation loops (:mod:`kgeval.integrations.pykeen`), and a Lightning callback
(:mod:`kgeval.integrations.lightning`). They are built on kgeval's public names only; the adapters that make other
libraries' models scoreable live below the engine, in :mod:`kgeval.adapters`. Each drop-in imports its library:
import the module you need.
"""

__all__: list[str] = []
