"""The theory store: what tuning confirmed, kept as parametric rules over parameter roles, so
a new shape (or a new kernel of the same class) gets a good config with no measurement.

A *rule* is keyed like the observed database (`heuristics.observed`): hardware level (the
GPU's name, its family, any GPU), kernel class, regime (the class's fallback category, e.g.
matmul "small_m" for M <= 64, or "all"), dtype family. Its body gives each role a *form*:

- `const v`: the role takes value v (tile roles are still capped at the dim's next power of
  two when the problem is smaller: a 128 tile on M = 16 becomes 16, never 128 of padding);
- `fit`: the tile covers its whole dim (next power of two of the dim), as far as the space
  allows: "one block per row", "one M tile for decode";
- `grid t`: this tile is chosen so the grid launches about t programs per SM on the target
  GPU: parallelism, not a size, is what transfers between shapes and GPUs;
- `par (v, t)`: the tile is v, halved (largest grid tile first) until the grid launches at
  least t programs per SM: big tiles where there is work enough, smaller ones where a big
  tile would leave SMs idle (few tiles, long K);
- `per e` (warps): as many warps as give each thread about e tile elements (the product of
  the tile sizes over the block's threads): what a thread holds in registers is what
  transfers, so a rule learned on big tiles does not put 16 warps on a tile a smaller shape
  shrank to 1024 elements.

`learn(observations)` builds rules from measured problems: candidates are the top configs of
every problem of a group re-expressed in these forms, each instantiated on every problem of
the group and scored by the geomean of its time over each problem's optimum; a greedy pass
then swaps single roles' forms while that improves the score. Support counts the problems
where the rule's config is within `SUPPORT_TOLERANCE` of the optimum, refute the rest, and
the rule lists where it was learned from (provenance), so a replay leaves its own shape out.

`predict(problem, space)` walks the lookup order (GPU name, family, any; regime, then "all";
dtype family, then any) and instantiates the first rule over the target space's roles, with
a confidence and whether it extrapolates (dims outside the range it saw, another GPU).

A rule says where it applies (`scope`): each problem it was learned from records what the
rule's config met there (the reduced dim held whole, walked in one trip or looped; the kernel's
kind of loop, read from its source; memory or compute bound) and the rule the roles its spaces
had. A kernel of another kind met in a way no confirmation met it declines the rule, and
`predict` serves the next source (the observed database, then the heuristics), saying which
rules it declined and why; a lesser departure (an unseen bound, a role no confirming space had)
is served with its reason and less confidence.

Where each part lives: `rules` (the records: a role's form, a rule, a prediction),
`instantiate` (forms to a config on a space, and a measured config to forms), `learn` (rules
from observations), `scope` (the facts a rule was confirmed under, and the judgment of a new
kernel against them), `book` (the `TheoryBook`: lookup order, predictions, the JSON file and the
packaged book), `predict` (the packaged book's predictions, leaving out a replay's own
problem, and the next source where every rule is declined; the zero-shot answer), `gaps`
(where a learned source would extrapolate on a space) and `choice` / `choice_build` (whether
the learned sources or the kernel's own default is served per class, by nested
leave-one-kernel-out evidence, theory/data/sources.json).
"""
from .book import (DATA_DIR, FORMAT, UNREAD_WEIGHT, UNSEEN_KERNEL_FACTOR, VERSION, TheoryBook, confirmed_kernels,
                   packaged_book)
from .instantiate import FILL_FLOOR, departures, forms_of, instantiate, tile_elements, warpgroup_repair
from .learn import MIN_GROUP, MISSING_PENALTY, SUPPORT_TOLERANCE, TOP, learn, learn_with_held_out, shape_id
from .predict import FALLBACK_SEEDS, bundled_observations, predict, predictions
from .rules import ALL, Form, Prediction, TheoryRule

__all__ = ["ALL", "DATA_DIR", "FALLBACK_SEEDS", "FILL_FLOOR", "FORMAT", "Form", "MIN_GROUP", "MISSING_PENALTY",
           "Prediction", "SUPPORT_TOLERANCE", "TOP", "TheoryBook", "TheoryRule", "UNREAD_WEIGHT",
           "UNSEEN_KERNEL_FACTOR", "VERSION", "bundled_observations", "confirmed_kernels", "departures", "forms_of",
           "instantiate", "learn", "learn_with_held_out", "packaged_book", "predict", "predictions", "shape_id",
           "tile_elements", "warpgroup_repair"]
