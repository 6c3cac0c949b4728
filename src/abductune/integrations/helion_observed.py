"""abductune's observed database in the layout of Helion's observed heuristics (helion#2378), and its reader.

No Helion import: the layout is plain JSON. What it holds (schema_version 2):

    {"schema_version": 2, "description": ..., "policy": {...},
     "rules": [{"kernel_class": "matmul",
                "shape_bucket": {"aspect": "balanced", "dtype": "fp16_bf16", "k_bin": "<=4096",
                                 "m_bin": "<=4096", "n_bin": "<=4096"},
                "match_exact_only": true, "source": {...},
                "templates": [{"template": {"block_sizes": [128, 256, 64], "num_warps": 8, ...},
                               "win_count": 3, "shape_coverage": 3, "geomean_slowdown": 1.0,
                               "p90_slowdown": 1.0}]}],
     "fallbacks": {"matmul": {"small_m": {"template": {...}, "source": {...}}}}}

A rule matches a kernel whose class and shape bucket are exactly its own; a class's fallback
answers, by a coarse shape group, where no rule does. Templates are sparse Helion configs.

abductune keys its rules by its own shape buckets (dims rounded up to powers of four) and its
templates by role; the export re-keys each rule by the Helion buckets of the shapes it was
learned from (one Helion rule per bucket met, their templates merged in rank order) and
writes each role template as Helion fields in the block order of Helion's examples: matmul
classes [M, N, K], attention [batch-head, M, N] (a batch-head tile of 1), row classes
block_sizes [rows] with reduction_loops [cols chunk], elementwise [numel]; warps, stages and
group become num_warps, num_stages and l2_groupings. A row-reduction rule is exported under
the Helion class its kernel's name says (softmax, RMS norm, layer norm, cross-entropy), and
rules with no Helion counterpart (no dtype named, templates keyed by parameter names, int8
weights) are listed under "skipped" in the policy, with why.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from ..classify import dtype_family as abductune_family
from ..errors import DatasetError
from ..files import atomic_write_text

SCHEMA_VERSION = 2
MATMUL_CLASSES = ("matmul", "matmul_fp8", "grouped_matmul", "batched_matmul", "split_k_matmul",
                  "matmul_int4", "matmul_int16", "matmul_fp4")
ROW_CLASSES = ("row_softmax", "row_norm_rms", "row_norm_layer", "row_cross_entropy")

# Helion's bins (upper bounds; past the last, ">last")
BINS: dict[str, tuple[int, ...]] = {
    "m_bin": (4, 8, 16, 64, 128, 256, 512, 1024, 4096), "n_bin": (64, 128, 256, 512, 1024, 4096),
    "k_bin": (64, 128, 256, 512, 1024, 4096, 32768),
    "rows_bin": (512, 2048, 4096, 16384, 65536, 262144), "cols_bin": (512, 1024, 2048, 4096, 8192, 16384, 32768),
    "numel_bin": (4096, 65536, 1048576, 16777216, 134217728),
    "batch_heads_bin": (32, 64, 128, 256), "head_dim_bin": (64, 128, 256),
    "seq_bin": (1, 16, 1024, 2048, 4096, 8192, 16384), "kv_seq_bin": (1024, 2048, 4096, 8192, 16384)}
_ROW_NAMES = (("cross_entropy", "row_cross_entropy"), ("softmax", "row_softmax"),
              (r"rms", "row_norm_rms"), (r"layer_?norm|(^|_)ln(_|$)", "row_norm_layer"))
_LEVEL = {"name": 0, "family": 1, "any": 2}


def bin_le(value: int | None, bins: tuple[int, ...]) -> str:
    if value is None:
        return "unknown"
    return next((f"<={b}" for b in bins if value <= b), f">{bins[-1]}")


def helion_dtype(family: str) -> str | None:
    """Helion's dtype family of abductune's ("fp16" -> "fp16_bf16"); None for "any"."""
    fam = abductune_family(family) if family not in ("fp16", "fp32", "fp8", "any") else family
    return {"fp16": "fp16_bf16", "fp32": "fp32", "fp8": "fp8"}.get(fam, None if fam == "any" else (
        "int" if fam.startswith("int") else "other"))


def helion_class(kernel_class: str, variant: str = "", kernels: Iterable[str] = (), dtype: str = "") -> str | None:
    """Helion's class for an abductune class (None where Helion has none)."""
    if kernel_class == "matmul":
        return "grouped_matmul" if variant == "moe" else ("matmul_fp8" if dtype == "fp8" else "matmul")
    if kernel_class == "quantized_matmul":
        return {"int4": "matmul_int4", "int16": "matmul_int16", "fp4": "matmul_fp4", "fp8": "matmul_fp8"}.get(variant)
    if kernel_class in ("attention", "elementwise"):
        return kernel_class
    if kernel_class == "row_reduction":
        names = " ".join(kernels).lower()
        return next((cls for pat, cls in _ROW_NAMES if re.search(pat, names)), None)
    return None


def _aspect(m: int, n: int, k: int) -> str:
    lo, hi = min(m, n, k), max(m, n, k)
    if hi / max(1, lo) < 4:
        return "balanced"
    return "skinny_m" if m == lo else ("skinny_n" if n == lo else "skinny_k")


def shape_bucket(kernel_class: str, dims: Mapping[str, int], dtype: str) -> dict[str, str]:
    """Helion's shape bucket of a kernel of Helion class `kernel_class` with abductune's
    canonical dims (M, N, K / rows, cols / numel / batch, heads, seq, head_dim, kv_seq)."""
    d = {k: int(v) for k, v in dims.items()}
    if kernel_class in MATMUL_CLASSES:
        m, n, k = d.get("M"), d.get("N"), d.get("K")
        aspect = _aspect(m, n, k) if m and n and k else "unknown"
        return {"aspect": aspect, "dtype": dtype, "k_bin": bin_le(k, BINS["k_bin"]),
                "m_bin": bin_le(m, BINS["m_bin"]), "n_bin": bin_le(n, BINS["n_bin"])}
    if kernel_class in ROW_CLASSES:
        return {"cols_bin": bin_le(d.get("cols"), BINS["cols_bin"]), "dtype": dtype,
                "rows_bin": bin_le(d.get("rows"), BINS["rows_bin"])}
    if kernel_class == "elementwise":
        return {"dtype": dtype, "numel_bin": bin_le(d.get("numel"), BINS["numel_bin"])}
    if kernel_class == "attention":
        bh = d.get("batch", 1) * d.get("heads", 1)
        out = {"batch_heads_bin": bin_le(bh, BINS["batch_heads_bin"]), "dtype": dtype,
               "head_dim_bin": bin_le(d.get("head_dim"), BINS["head_dim_bin"]),
               "seq_bin": bin_le(d.get("seq"), BINS["seq_bin"])}
        if d.get("kv_seq", d.get("seq")) != d.get("seq"):
            out["kv_seq_bin"] = bin_le(d.get("kv_seq"), BINS["kv_seq_bin"])
        return out
    return {"dtype": dtype}


def fallback_group(kernel_class: str, dims: Mapping[str, int]) -> str | None:
    """Helion's coarse shape group of a kernel (its fallback key), None where it has none."""
    d = {k: int(v) for k, v in dims.items()}
    if kernel_class in MATMUL_CLASSES and all(x in d for x in "MNK"):
        m, n, k = d["M"], d["N"], d["K"]
        if m <= 256:
            return "small_m"
        if n <= 256:
            return "small_n"
        if k <= 256:
            return "small_k"
        return "balanced" if max(m, n, k) / max(1, min(m, n, k)) < 2 else "rect"
    if kernel_class in ROW_CLASSES and "rows" in d and "cols" in d:
        if d["rows"] <= 512:
            return "short"
        return "narrow" if d["cols"] <= 1024 else ("wide" if d["cols"] >= 8192 else "square")
    if kernel_class == "elementwise" and "numel" in d:
        return "tiny" if d["numel"] <= 65536 else ("mid" if d["numel"] <= 1048576 else "huge")
    if kernel_class == "attention" and "seq" in d and "head_dim" in d:
        if d["seq"] <= 1024:
            return "short_seq"
        if d["seq"] >= 8192:
            return "long_seq"
        return "small_head" if d["head_dim"] <= 64 else "mid_seq"
    return None


# ----------------------------------------------------------------------------- templates

def _block_roles(kernel_class: str) -> tuple[list[str | None], list[str]]:
    """(block_sizes roles, reduction_loops roles) in the block order of Helion's examples;
    None: a tile fixed at 1 (attention's batch-head tile)."""
    if kernel_class in MATMUL_CLASSES:
        return ["tile:M", "tile:N", "tile:K"], []
    if kernel_class == "attention":
        return [None, "tile:M", "tile:N"], []
    if kernel_class in ROW_CLASSES:
        return ["tile:X"], ["tile:R"]
    if kernel_class == "elementwise":
        return ["tile"], []
    return [], []


def to_helion_template(kernel_class: str, roles: Mapping[str, Any]) -> dict[str, Any] | None:
    """A role template ({"@tile:M": 128, "@warps": 8, ...}) as a sparse Helion config, or
    None when its tiles do not cover the class's blocks."""
    r = {k[1:]: v for k, v in roles.items() if k.startswith("@")}
    if kernel_class == "elementwise" and "tile" not in r and "tile:X" in r:
        r["tile"] = r["tile:X"]
    blocks, loops = _block_roles(kernel_class)
    if any(b is not None and b not in r for b in blocks):
        return None
    out: dict[str, Any] = {}
    if blocks:
        out["block_sizes"] = [1 if b is None else int(r[b]) for b in blocks]
    if loops and all(x in r for x in loops):
        out["reduction_loops"] = [int(r[x]) for x in loops]
    for role, key in (("warps", "num_warps"), ("stages", "num_stages")):
        if role in r:
            out[key] = int(r[role])
    if "group" in r:
        out["l2_groupings"] = [int(r["group"])]
    return out


def from_helion_template(kernel_class: str, template: Mapping[str, Any]) -> dict[str, Any]:
    """The role template of a sparse Helion config (the inverse of `to_helion_template`)."""
    blocks, loops = _block_roles(kernel_class)
    out: dict[str, Any] = {}
    for role, v in zip(blocks, template.get("block_sizes") or []):
        if role is not None:
            out[f"@{role}"] = v
    for role, v in zip(loops, template.get("reduction_loops") or []):
        if v is not None:
            out[f"@{role}"] = v
    for key, role in (("num_warps", "warps"), ("num_stages", "stages")):
        if key in template:
            out[f"@{role}"] = template[key]
    if template.get("l2_groupings"):
        out["@group"] = template["l2_groupings"][0]
    return out


# ----------------------------------------------------------------------------- the reader

@dataclass(frozen=True)
class HelionTemplate:
    template: dict[str, Any]
    stats: dict[str, Any] = field(default_factory=dict)


@dataclass
class HelionRule:
    kernel_class: str
    shape_bucket: dict[str, str]
    templates: list[HelionTemplate]
    source: dict[str, Any] = field(default_factory=dict)


@dataclass
class ObservedLayout:
    """A file in Helion's observed-heuristics layout, read (module docstring)."""

    rules: list[HelionRule]
    fallbacks: dict[str, dict[str, HelionTemplate]]
    meta: dict[str, Any] = field(default_factory=dict)

    def match(self, kernel_class: str, bucket: Mapping[str, str]) -> list[HelionTemplate]:
        """The templates of the rule for exactly this class and bucket ([] when none)."""
        want = json.dumps(dict(bucket), sort_keys=True)
        for r in self.rules:
            if r.kernel_class == kernel_class and json.dumps(r.shape_bucket, sort_keys=True) == want:
                return list(r.templates)
        return []

    def lookup(self, kernel_class: str, dims: Mapping[str, int], dtype: str) -> list[HelionTemplate]:
        """The rule's templates for this kernel, else its class's fallback for its shape group."""
        got = self.match(kernel_class, shape_bucket(kernel_class, dims, dtype))
        if got:
            return got
        group = fallback_group(kernel_class, dims)
        fb = self.fallbacks.get(kernel_class, {}).get(group or "")
        return [fb] if fb is not None else []

    def role_templates(self, kernel_class: str, dims: Mapping[str, int], dtype: str) -> list[dict[str, Any]]:
        """`lookup`'s templates as abductune role templates ({"@tile:M": 128, ...})."""
        return [from_helion_template(kernel_class, t.template) for t in self.lookup(kernel_class, dims, dtype)]

    def to_dict(self) -> dict[str, Any]:
        tpl = lambda t: {"template": dict(t.template), **t.stats}  # noqa: E731
        return {**self.meta, "schema_version": SCHEMA_VERSION,
                "rules": [{"kernel_class": r.kernel_class, "shape_bucket": dict(r.shape_bucket),
                           "match_exact_only": True, "source": r.source,
                           "templates": [tpl(t) for t in r.templates]} for r in self.rules],
                "fallbacks": {c: {g: tpl(t) for g, t in gs.items()} for c, gs in self.fallbacks.items()}}


def _template(raw: Any, where: str) -> HelionTemplate:
    if not isinstance(raw, Mapping) or not isinstance(raw.get("template"), Mapping):
        raise DatasetError(f"{where}: a template entry must be an object with a 'template' object")
    return HelionTemplate(dict(raw["template"]), {k: v for k, v in raw.items() if k != "template"})


def read_observed_layout(src: str | os.PathLike[str] | Mapping[str, Any]) -> ObservedLayout:
    """Read a file (or its parsed JSON) in Helion's observed-heuristics layout; DatasetError
    naming the file and the entry when it is not in that layout."""
    where = "observed heuristics"
    if isinstance(src, Mapping):
        data: Any = src
    else:
        where = str(src)
        try:
            data = json.loads(Path(src).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as e:
            raise DatasetError(f"{where}: cannot read it as JSON ({type(e).__name__}: {e})") from None
    if not isinstance(data, Mapping) or not isinstance(data.get("rules", []), list):
        raise DatasetError(f"{where}: not in Helion's observed-heuristics layout (an object with a 'rules' list)")
    version = data.get("schema_version", SCHEMA_VERSION)
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise DatasetError(f"{where}: schema_version {version!r} is newer than the {SCHEMA_VERSION} abductune reads")
    rules = []
    for i, r in enumerate(data.get("rules", [])):
        at = f"{where}: rules[{i}]"
        if not isinstance(r, Mapping) or not isinstance(r.get("kernel_class"), str) \
                or not isinstance(r.get("shape_bucket"), Mapping):
            raise DatasetError(f"{at} needs a 'kernel_class' string and a 'shape_bucket' object")
        temps = r.get("templates", [])
        if not isinstance(temps, list):
            raise DatasetError(f"{at}: 'templates' must be a list")
        rules.append(HelionRule(r["kernel_class"], {str(k): str(v) for k, v in r["shape_bucket"].items()},
                                [_template(t, f"{at}.templates[{j}]") for j, t in enumerate(temps)],
                                dict(r.get("source") or {})))
    fallbacks: dict[str, dict[str, HelionTemplate]] = {}
    raw_fb = data.get("fallbacks", {})
    if not isinstance(raw_fb, Mapping):
        raise DatasetError(f"{where}: 'fallbacks' must be an object (class -> shape group -> template)")
    for cls, groups in raw_fb.items():
        if not isinstance(groups, Mapping):
            raise DatasetError(f"{where}: fallbacks[{cls!r}] must be an object (shape group -> template)")
        fallbacks[str(cls)] = {str(g): _template(t, f"{where}: fallbacks[{cls!r}][{g!r}]") for g, t in groups.items()}
    meta = {k: v for k, v in data.items() if k not in ("rules", "fallbacks", "schema_version")}
    return ObservedLayout(rules, fallbacks, meta)


# ----------------------------------------------------------------------------- the export

def _templates(hcls: str, templates: Iterable[Any]) -> list[HelionTemplate]:
    out = []
    for t in templates:
        ht = to_helion_template(hcls, t.config)
        if ht is not None:
            stats = {"win_count": t.wins, "shape_coverage": t.shapes, "geomean_slowdown": t.geomean_slowdown,
                     "p90_slowdown": t.p90_slowdown}
            if t.vs_default is not None:
                stats["vs_default"] = t.vs_default
            out.append(HelionTemplate(ht, stats))
    return out


def export_observed_layout(database: Any, *, hardware: str | None = None,
                           path: str | os.PathLike[str] | None = None) -> ObservedLayout:
    """abductune's observed database (a `heuristics.observed.Database`) in Helion's layout;
    written to `path` when given. `hardware`: only rules at that key ("H100-SXM",
    "family:nvidia/hopper", "*"); by default every rule, the most specific level winning
    where two name the same Helion class and bucket."""
    rules: dict[tuple[str, str], HelionRule] = {}
    level: dict[tuple[str, str], int] = {}
    fallbacks: dict[str, dict[str, tuple[int, int, HelionTemplate]]] = {}
    skipped: list[str] = []
    for r in database.rules:
        if hardware is not None and r.hardware != hardware:
            continue
        lvl = _LEVEL["any"] if r.hardware == "*" else (_LEVEL["family"] if r.hardware.startswith("family:")
                                                        else _LEVEL["name"])
        label = f"{r.hardware} {r.kernel_class} {r.bucket} {r.dtype_family}"
        dtype = helion_dtype(r.dtype_family)
        if dtype is None:
            skipped.append(f"{label}: no Helion dtype family for it")
            continue
        # a row rule learned from a softmax and an RMS norm goes to both Helion classes
        by_class: dict[str, list[Mapping[str, int]]] = {}
        for o in r.learned_from or []:
            c = helion_class(r.kernel_class, r.variant, [o.kernel], r.dtype_family)
            if c is not None:
                by_class.setdefault(c, []).append(o.dims)
        if not by_class:
            c = helion_class(r.kernel_class, r.variant, [r.kernel] if r.kernel else [], r.dtype_family)
            if c is not None:
                by_class[c] = []
        if not by_class:
            skipped.append(f"{label}: no Helion class for it")
            continue
        source = {"hardware": r.hardware, "bucket": r.bucket, "dtype_family": r.dtype_family,
                  "learned_from": [o.to_dict() for o in r.learned_from]}
        for hcls, shapes in by_class.items():
            temps = _templates(hcls, r.templates)
            if not temps:
                skipped.append(f"{label}: its templates do not name every tile of a Helion {hcls} by role")
            elif r.is_fallback:
                groups = {fallback_group(hcls, d) for d in shapes if d} or {r.bucket.split(":", 1)[1]}
                for g in sorted(x for x in groups if x):
                    have = fallbacks.setdefault(hcls, {}).get(g)
                    rank = (lvl, -int(temps[0].stats.get("win_count", 0)))
                    if have is None or rank < have[:2]:
                        stats = {**temps[0].stats, "source": {"abductune": source}}
                        fallbacks[hcls][g] = (*rank, HelionTemplate(temps[0].template, stats))
            elif not any(shapes):
                skipped.append(f"{label}: no learned-from shapes to place it in Helion's buckets")
            else:
                for b in {json.dumps(shape_bucket(hcls, d, dtype), sort_keys=True) for d in shapes if d}:
                    key = (hcls, b)
                    if key in rules and level[key] < lvl:
                        continue
                    if key not in rules or level[key] > lvl:
                        rules[key] = HelionRule(hcls, json.loads(b), [], {"abductune": []})
                        level[key] = lvl
                    have_t = {json.dumps(t.template, sort_keys=True) for t in rules[key].templates}
                    rules[key].templates += [t for t in temps if json.dumps(t.template, sort_keys=True) not in have_t]
                    rules[key].source["abductune"].append(source)
    meta = {"description": "abductune's observed database (measured best templates per kernel class, shape "
                           "bucket and dtype family) in Helion's observed-heuristics layout",
            "policy": {"matching": "exact shape bucket only", "device": hardware or "as each rule's source says",
                       "block_order": "matmul [M, N, K]; attention [batch-head, M, N]; rows block_sizes [rows], "
                                      "reduction_loops [cols chunk]; elementwise [numel]",
                       "fallbacks": "the best template of abductune's per-class fallback rule, by Helion's shape "
                                    "group of the shapes it was learned from",
                       "skipped": skipped}}
    out = ObservedLayout([rules[k] for k in sorted(rules)],
                         {c: {g: v[2] for g, v in sorted(gs.items())} for c, gs in sorted(fallbacks.items())}, meta)
    if path is not None:
        atomic_write_text(Path(path), json.dumps(out.to_dict(), indent=1, sort_keys=True) + "\n")
    return out
