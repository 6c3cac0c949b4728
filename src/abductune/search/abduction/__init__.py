"""Abduction: explain why the incumbent is slow and measure only what the explanation predicts.

The loop, one small batch at a time:

1. *Observe.* Seeds come first (the Session feeds them: heuristics, the observed database,
   theory predictions, the kernel's own list); the Search measures them before this strategy
   runs. Without a usable seed the space default is measured (on a kernel no theory was
   confirmed on, with `cold_start` space-filling draws beside it); in generic mode (a space the
   diagnosis can say nothing about: no roofline, no static facts, e.g. public Kernel Tuner
   data) a small space-filling sample (a Latin hypercube over value indices) is measured.
2. *Diagnose* the incumbent (`theory.diagnose`) and ask the theory library for hypotheses,
   ranked by expected gain times credibility in this run (Laplace's rule over the support /
   refute tally of the theory and of the same move from earlier incumbents, starting from the
   verdicts of earlier runs on this kernel class and GPU, scaled to a few tests), plus the
   speed-up an additive model of everything measured predicts -- except for an interaction
   theory (`tile_shape`), whose moves that model cannot see, until this run refutes it once;
   at most half a batch per theory, so one wrong explanation cannot fill a batch.
   Trust is earned on this kernel (issue 27): a theory whose tests here lost more than they
   won has no credit here until it wins again, so its moves rank as the model ranks them
   (`_theory_trusted`); and on a kernel no rule was confirmed on, or once the theories' tests
   here keep failing, a share of each batch explores the whole space (`_global_slots`,
   `_explore_tests`: the head of the ranker's order, `Knowledge.prior`, taking turns with a
   space-filling start, then TPE) whatever anyone predicts, and each
   theory gets one test per batch, until the theories have won EARN_TRUST tests here
   (`_pooled_trust`). The share is sized by each side's record (`_tally_sides`): how many of
   the exploring share's tests, and of the local tests, beat the incumbent beyond noise
   (Laplace's rule over each). Half a batch at first (rounded down); it yields while the local
   tests keep winning and grows as they stall or as exploring wins; never the whole batch;
   once the theories have earned trust it goes on only while exploring keeps winning (from a
   poor seed any move wins, so the theories' wins alone do not show that exploring has nothing
   left to find). A local search from a seed the theories got
   wrong stays in that seed's basin; a draw from the whole space does not. These are logged
   as "trust" and "explore" events, which `explain` prints with the verdict that decided
   them.
3. *Test* the top few (`batch`, 2-4), and judge each against the incumbent with
   `theory.evidence`: supported / refuted beyond the noise threshold taken from measured spread
   and repeats (with a floor). A win while nothing says how noisy times are is re-measured,
   interleaved with the incumbent (`ctx.remeasure`), before the incumbent changes; a close
   call (a candidate faster within the noise threshold) waits for the stall (`_confirm_now`,
   `_run_off`): two measurements to move by less than the noise are worth it only once the
   search finds nothing larger. Two supported moves on different parameters are composed and
   tested next.
4. *Finish* with multi-parameter moves around the incumbent (single and pairwise moves of
   radius 2, pattern search's pairwise tile moves, `generic_moves` along the parameters and
   pairs that the measurements so far say matter), ranked by the additive model of log-time
   (main effects plus the strongest interactions). They compete with the hypotheses on one
   scale, so they fill a batch the theories cannot, and take over when no theory expects a
   gain; an expected gain within the noise threshold is a tie, and ties go coarse first, one
   move per parameter before a second on any (`_ranked`). The model's shrinkage follows the
   spread of the times measured, as a ridge penalty does (`_shrink`; with a fixed shrinkage a
   config seen once and 3x slower booked half its effect to the parameters it shared with
   others). A move that wins sends the engine back to step 2 at the new incumbent, where the
   same move once more (`extend`, Hooke and Jeeves's pattern move) competes on that scale with
   the gain it just showed times the credibility continuations earned in this run. Moves the
   model cannot tell apart (values it has not seen, which it holds level with the better of
   the nearest seen values on either side) go coarse first, a single parameter moved
   COARSE_STEP values before one, as pattern search polls; and a config that differs from a
   measured one only in parameters that made no difference wherever this run varied them
   alone (`_inert`: stages in a kernel with no loop) comes after every other test.
5. *Fall back* when the neighbourhood is exhausted or `patience` tests in a row brought no
   win beyond noise: proposals from TPE (Optuna ask/tell), until one of them wins, which
   restarts the local loop there. With roles, half of each stalled batch still sweeps the
   nearest untested moves in order of distance, whatever the model predicts of them (it has
   just been wrong `patience` times; a two-parameter move such as a smaller N tile with one
   stage fewer is often where the optimum hides). TPE is told the seeds, the start, its own
   proposals, the exploring share's and the model's proposals and every incumbent -- not the
   dense cluster of local moves, which would
   make the current basin its whole "good" set (told everything, it stayed in one basin of a
   public convolution space). The strategy never ends before its budget unless the whole
   space is measured (a TPE proposal it has seen is replaced by a random unmeasured config).
   If another `patience` tests bring no win either, or as soon as the incumbent has stood
   against every point of pattern search's poll (`_polled_out`: where pattern search itself
   restarts), the search restarts from the best measured config outside the basins searched
   so far, as generic mode does at once (below): on the bundled skinny matmul shapes a basin
   one or two parameters from the optimum held whole 64-evaluation runs. When it first
   stalls, an incumbent whose noise nothing has measured is re-measured once (`_noise_probe`):
   it may have been measured fast by chance; and the fastest close call it met is run off
   against it (`_run_off`).

Generic mode (no theory applies) differs in four ways, all for global search over a space the
engine knows nothing about:

- every batch mixes `tpe_slots` TPE proposals, `model_slots` proposals from the whole space by
  Thompson sampling of the additive model (fitted to a bootstrap resample of the measurements,
  so it explores what it knows little about; `seeded_model_slots`, none by default, once seeds
  were measured), and the best-ranked local moves (the rest of `batch`);
- `patience` counts only the tests the engine chose itself (local moves, model proposals): a
  TPE miss says nothing about the incumbent's basin;
- when nothing measured says how noisy the times are (single samples, no repeats), the best
  config of the start is re-measured once: a noise probe, after which only close calls are
  confirmed, instead of every early win costing two more measurements;
- when the local search stalls it restarts from the best measured config more than one local
  move (LOCAL_REACH parameters) away from every incumbent where it stalled before -- iterated
  local search, so one trap cannot hold the rest of the budget (on public spaces a local
  optimum 1.5x off the best held whole runs); only when no such config is measured does TPE
  take every slot.

No config the resource model (`theory.resources`) says cannot launch on the GPU is ever
proposed, by a theory, a finishing move or TPE ("prune" in the log): it would cost a compile
and a failed launch to learn what the tile sizes already say.

Every step is logged through `ctx.log` ("prior", "observe", "hypothesis", "test", "verdict",
"move", "fallback", "prune"), citing measurement ids where the evaluator's store set them, so `explain` can
print which measurement supported or refuted which hypothesis.

Where each part lives: `strategy` (the `Abduction` options and the engine's loop), `ledger`
(what this run measured and what each test said: verdicts, move tallies, trust), `planning`
(which configs the next batch tests, and which the resource model prunes), `model` (the
additive model of log-time and the space-filling start), `stop` (the stop rule and the restart
from another basin), `moves` (a test and the moves between configs).
"""
from .ledger import DISTRUST_AFTER, EARN_TRUST, TRUST_MIN
from .model import PAIR_MIN, PAIR_TERMS, Additive, latin_hypercube
from .moves import COARSE_STEP, COMPOSE, EXPLORE, EXTEND, LOCAL_REACH, MODEL, POLL, START, TPE_TEST
from .planning import LOOKAHEAD, MAX_TPE_RETRIES, informative
from .strategy import Abduction

__all__ = ["Abduction", "Additive", "COARSE_STEP", "COMPOSE", "DISTRUST_AFTER", "EARN_TRUST", "EXPLORE", "EXTEND",
           "LOCAL_REACH", "LOOKAHEAD", "MAX_TPE_RETRIES", "MODEL", "PAIR_MIN", "PAIR_TERMS", "POLL", "START",
           "TPE_TEST", "TRUST_MIN", "informative", "latin_hypercube"]
