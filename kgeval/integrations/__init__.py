"""Drop-ins: kgeval inside other libraries' machinery -- PyKEEN's evaluator classes for its pipeline, stopper, HPO
and evaluation loops (:mod:`kgeval.integrations.pykeen`), a Lightning callback (:mod:`kgeval.integrations.lightning`),
and results logged to W&B, MLflow, TensorBoard or a Lightning logger through their own APIs
(:mod:`kgeval.integrations.trackers`). They are built on kgeval's public names only; the adapters that make other
libraries' models scoreable live below the engine, in :mod:`kgeval.adapters`. Each drop-in imports its library:
import the module you need.
"""

__all__: list[str] = []
