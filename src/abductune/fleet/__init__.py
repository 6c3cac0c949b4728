"""Tuning on a fleet of GPUs: one worker per GPU (`worker.FleetWorker`), where the workers run
(`executor`: the interface, and local processes), the driver's dispatcher (`farm`), one search's
view of it (`evaluator.FleetEvaluator`), and the fleet's tune and sweep (`run`). Ray plugs in as
an executor (`integrations/ray.py`). docs/FLEET.md tells how to use it."""
from .evaluator import FleetEvaluator
from .executor import Executor, ProcessExecutor, WorkerLost
from .farm import Farm, FleetError, FleetStopped, calibrate
from .run import FleetRun, sweep_fleet, tune_fleet
from .worker import FleetWorker, Job, Reply, Target, build_evaluator

__all__ = ["Executor", "Farm", "FleetError", "FleetStopped", "FleetEvaluator", "ProcessExecutor", "WorkerLost",
           "calibrate", "FleetRun", "sweep_fleet", "tune_fleet", "FleetWorker", "Job", "Reply", "Target",
           "build_evaluator"]
