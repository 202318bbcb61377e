"""One stage of a run, step by step (`StageLoop.run`): the micro-batches of a step through
the engine, the stage's steps fitted to a time budget from its measured speed, the log
rows, the evaluations and checkpoints at their steps, and the stage's export at its end."""

from __future__ import annotations

import math
import os
import time

from codeexecutor.training.budget import WARMUP, RecentSpeed, StepClock
from codeexecutor.training.data import Prefetcher
from codeexecutor.training.distributed import agreed, agreed_fixed
from codeexecutor.training.export import export_model, save_checkpoint
from codeexecutor.training.plots import plot_losses
from codeexecutor.training.setup import autocast
from codeexecutor.training.stages import evaluate, evaluator_for, log_row, loss_scaling, stage_data


class StageLoop:
    """Stage `si` of `run` from its current global step to its end (or `max_steps`)."""

    def __init__(
        self, run, si: int, start_of: int, max_steps: int | None, budgeted: bool, budget, writer, profiler
    ) -> None:
        import torch

        cur = run.cur
        self.run_, self.si, self.stage, self.start_of, self.max_steps = run, si, cur.stages[si], start_of, max_steps
        self.budgeted, self.budget, self.writer, self.profiler = budgeted, budget, writer, profiler  # budget: rank 0's
        self.end_of = start_of + self.stage.steps
        self.log_path = os.path.join(run.out, "train_log.jsonl")
        mining = None
        if budgeted:  # rank 0's budget decides, every rank takes it
            mining = agreed(int(budget.mining_seconds(si)) if budget is not None else 0)
        self.data = stage_data(run, si, mining)
        self.evaluator = evaluator_for(run, si)
        self.bar = None
        if run.rank == 0:
            from codeexecutor.progress import bar as progress_bar

            self.bar = progress_bar(
                total=self.stage.steps,
                initial=run.global_step - start_of,
                desc=f"stage {si + 1} {self.stage.name}",
                unit="step",
            )
        self.accum = run.ds_cfg["gradient_accumulation_steps"]
        self.size = run.ds_cfg["train_micro_batch_size_per_gpu"]
        self.unfixed = self.budgeted and not agreed_fixed(budget, self.stage)
        self.clock, self.recent = StepClock(), RecentSpeed()  # the warm-up's speed; a fixed stage's recent speed
        self.t0, self.tokens, self.computed, self.examples = time.perf_counter(), 0, 0, 0
        self.loss_sum = torch.zeros((), device=run.engine.device)  # on the device until a log step reads it
        self.loss_count = 0
        self.saved_at = -1
        self.batches = self._batches()

    def stop(self) -> int:
        return min(self.end_of, self.max_steps) if self.max_steps is not None else self.end_of

    def _batches(self) -> Prefetcher:
        r = self.run_
        return Prefetcher(
            self.data,
            r.cur.train.seed,
            self.start_of,
            range(r.global_step, self.stop()),
            self.accum,
            (r.rank, self.size),
            r.engine.device,
        )

    def run(self) -> tuple[int, int]:
        """Train the stage; returns (its end step, the step of the last checkpoint saved, -1 if none)."""
        r = self.run_
        r.engine.train()
        while r.global_step < self.stop():
            self._step()
            self._fit()
            if self.bar is not None:
                self.bar.update(1)
            if r.global_step % r.cur.train.log_every == 0 or r.global_step in (self.end_of, self.max_steps):
                self._log()
            self._after_step()
        self.batches.close()
        if self.bar is not None:
            self.bar.close()
        if r.global_step >= self.end_of:
            export_model(
                r.engine, r.tok, os.path.join(r.out, f"stage{self.si + 1}-{self.stage.name}"), r.rank, r.zero_stage
            )
            if r.rank == 0:
                plot_losses(self.log_path, os.path.join(r.out, "loss.png"))
        return self.end_of, self.saved_at

    def _step(self) -> None:
        """One optimizer step: its micro-batches forward and backward through the engine."""
        r = self.run_
        for _micro in range(self.accum):
            batch, real, padded, rows = self.batches.next()
            self.tokens, self.computed, self.examples = self.tokens + real, self.computed + padded, self.examples + rows
            with autocast(r.precision, r.engine.device):
                loss = r.engine(**batch).loss
            r.engine.backward(loss)
            r.engine.step()
            self.loss_sum += loss.detach().float()
            self.loss_count += 1
        r.global_step += 1
        self.profiler.after(r.global_step)

    def _fit(self) -> None:
        """A budgeted stage's steps: fixed after its warm-up from its measured speed, then
        fitted again at log steps from its recent speed; every rank takes rank 0's."""
        r, stage, budget = self.run_, self.stage, self.budget
        done = r.global_step - self.start_of
        steps = stage.steps
        if self.unfixed:
            self.clock.tick()
            if done == min(WARMUP, stage.steps - 1):  # the warm-up ran: the stage's total is fixed
                steps = agreed(budget.fix(self.si, self.clock.seconds_per_step(), done) if budget else 0)
                self.unfixed, self.recent = False, RecentSpeed(r.global_step)
        elif self.budgeted and r.global_step % r.cur.train.log_every == 0:  # fitted again to the moment its fix planned
            sps = self.recent.tick(r.global_step)  # None at a resumed stage's first log step: its start-up is no speed
            if sps is not None:
                steps = agreed(budget.refit(self.si, sps, done) if budget else 0)
        if steps != stage.steps or self.end_of != self.start_of + steps:
            stage.steps, self.end_of = steps, self.start_of + steps
            self.batches.close()
            self.batches = self._batches()
            if self.bar is not None:
                from codeexecutor.progress import set_total

                set_total(self.bar, stage.steps)

    def _log(self) -> None:
        """A log row: the mean loss since the last (one host sync a log step), the speed in
        example tokens (padding left out), the loss scale in fp16."""
        r = self.run_
        loss_value = self.loss_sum.item() / self.loss_count
        self.loss_sum.zero_()
        self.loss_count = 0
        if not math.isfinite(loss_value):
            raise RuntimeError(f"loss is {loss_value} at step {r.global_step}; lower the learning rate")
        if r.rank != 0:
            return
        self.bar.set_postfix(loss=f"{loss_value:.3f}")
        elapsed = max(time.perf_counter() - self.t0, 1e-9)
        row = {
            "step": r.global_step,
            "stage": self.stage.name,
            "loss": loss_value,
            "lr": r.scheduler.get_last_lr()[0],
            "tokens_per_s": self.tokens * r.world / elapsed,
            "stage_tokens": self.tokens * r.world,
            "stage_examples": self.examples * r.world,
            "stage_seconds": elapsed,
            "padding_share": 1 - self.tokens / max(self.computed, 1),
            **loss_scaling(r.engine),
        }
        log_row(self.writer, self.log_path, row)
        if self.budget is not None:
            self.budget.save()

    def _after_step(self) -> None:
        """The evaluation and the checkpoint a step is due."""
        r, train = self.run_, self.run_.cur.train
        at_end = r.global_step == self.end_of
        if self.evaluator is not None and (at_end or (train.eval_every and r.global_step % train.eval_every == 0)):
            evaluate(r, self.evaluator, self.si, self.writer, self.log_path)
        if train.checkpoints and (r.global_step % train.save_every == 0 or at_end):
            save_checkpoint(r.engine, r.ckpt, r.global_step, train.keep_checkpoints, r.rank)
            self.saved_at = r.global_step
