"""Shared test setup. Tests write only to temporary folders: every test gets its own default
store ($ABDUCTUNE_STORE under its tmp_path), so no code path that opens the default store
(`Store()`, the decorator without `store=`, `tune --mode live`, `cache` without `--store`)
can reach the user's real cache folder; child processes inherit the variable. The session
also fails if the real default store appeared while it ran."""
from __future__ import annotations

import os
from pathlib import Path

import pytest


def real_default_store() -> Path:
    """Where `Store()` would write outside the tests (the user's cache folder)."""
    env = os.environ.get("ABDUCTUNE_STORE")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("abductune")) / "store.sqlite"


# computed before any test changes the environment; a child pytest (the interpreted decorator
# suites) inherits a temporary ABDUCTUNE_STORE, so this is then that temporary path
REAL_DEFAULT_STORE = real_default_store()
_EXISTED = {p: p.exists() for p in (REAL_DEFAULT_STORE, Path(f"{REAL_DEFAULT_STORE}-wal"))}


@pytest.fixture(autouse=True)
def _temporary_default_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "default-store" / "store.sqlite"
    monkeypatch.setenv("ABDUCTUNE_STORE", str(path))
    return path


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    made = [str(p) for p, existed in _EXISTED.items() if not existed and p.exists()]
    if made:
        session.exitstatus = 1
        print(f"\nerror: the test run created {', '.join(made)} (the real default store): a test opened "
              "the default store without the temporary ABDUCTUNE_STORE of tests/conftest.py")
