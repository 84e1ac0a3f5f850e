"""The costs of one grid step of a kernel body, as the walk adds them up (body.py fills
it; loops.py and whiles.py multiply what a loop's iterations add; pipeline.py times it)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class StepCost:
    """The costs of one grid step (mutable while a body is walked)."""

    flops: int = 0  # logical MXU FLOPs, 2·m·n·k
    # The MXU work in bf16-pass FLOPs (what the peak is quoted in), each dot's contracted and
    # output dims padded to a 128-wide systolic array (chips before v6e) and, ``_wide``, to a
    # 256-wide one (v6e and later): the array's idle cells are time spent (body.py).
    bf16_flops: float = 0.0
    int8_flops: float = 0.0
    bf16_flops_wide: float = 0.0
    int8_flops_wide: float = 0.0
    dma_read_bytes: int = 0  # HBM -> VMEM/SMEM, manual copies
    dma_write_bytes: int = 0  # VMEM/SMEM -> HBM, manual copies
    # Of those, the bytes of copies waited on with no work issued since they started (a
    # ``sync_copy``; a write started after the step's last dot and waited at its end): the
    # step waits for them, nothing hides them (body.py).
    exposed_dma_bytes: float = 0.0
    # Copies the body waits on, and the walks (a body, a loop's iteration) that wait on any:
    # each wait costs the scalar core, each round a copy's round trip (pipeline.py).
    dma_waits: float = 0.0
    wait_rounds: float = 0.0
    scoped_vmem_bytes: int = 0  # run_scoped allocations
    inner_steps: int = 0  # steps of pipelines inside the body (emit_pipeline), each charged
    # Vector work in vreg operations (vector.py): VALU ops and EUP pushes, with 16-bit types
    # worked as 32-bit (chips without a bf16 VPU) and packed (16, 128) (chips with one).
    vpu_ops: float = 0.0
    eup_ops: float = 0.0
    vpu_ops_packed: float = 0.0
    eup_ops_packed: float = 0.0
    notes: list[str] = field(default_factory=list)
    not_modelled: list[str] = field(default_factory=list)
    # Copies started after the last work of this jaxpr and not waited in it, by semaphore
    # (its atoms): a conditional's branch hands them to the body around it (body.py).
    tail_copies: dict = field(default_factory=dict)

    def work(self) -> float:
        """The compute issued so far (MXU and vector): a copy is hidden only behind it."""
        return self.bf16_flops + self.int8_flops + sum(getattr(self, n) for n in _VECTOR_FIELDS)

    def add(self, other: StepCost, times: int = 1) -> None:
        self.flops += other.flops * times
        self.bf16_flops += other.bf16_flops * times
        self.int8_flops += other.int8_flops * times
        self.bf16_flops_wide += other.bf16_flops_wide * times
        self.int8_flops_wide += other.int8_flops_wide * times
        self.dma_read_bytes += other.dma_read_bytes * times
        self.dma_write_bytes += other.dma_write_bytes * times
        self.exposed_dma_bytes += other.exposed_dma_bytes * times
        self.dma_waits += other.dma_waits * times
        self.wait_rounds += other.wait_rounds * times
        self.inner_steps += other.inner_steps * times
        for name in _VECTOR_FIELDS:
            setattr(self, name, getattr(self, name) + getattr(other, name) * times)
        self.scoped_vmem_bytes = max(self.scoped_vmem_bytes, other.scoped_vmem_bytes)
        self.notes += [n for n in other.notes if n not in self.notes]
        self.not_modelled += [n for n in other.not_modelled if n not in self.not_modelled]

    def add_share(self, other: StepCost, share: float) -> None:
        """``other`` run at a ``share`` of the steps: its mean cost per step."""
        self.flops += round(other.flops * share)
        self.bf16_flops += other.bf16_flops * share
        self.int8_flops += other.int8_flops * share
        self.bf16_flops_wide += other.bf16_flops_wide * share
        self.int8_flops_wide += other.int8_flops_wide * share
        self.dma_read_bytes += round(other.dma_read_bytes * share)
        self.dma_write_bytes += round(other.dma_write_bytes * share)
        self.exposed_dma_bytes += other.exposed_dma_bytes * share
        self.dma_waits += other.dma_waits * share
        self.wait_rounds += other.wait_rounds * share
        self.inner_steps += round(other.inner_steps * share)
        for name in _VECTOR_FIELDS:
            setattr(self, name, getattr(self, name) + getattr(other, name) * share)
        if share > 0:
            self.scoped_vmem_bytes = max(self.scoped_vmem_bytes, other.scoped_vmem_bytes)
            self.notes += [n for n in other.notes if n not in self.notes]
            self.not_modelled += [n for n in other.not_modelled if n not in self.not_modelled]

    def weight(self) -> float:
        # Vector work weighs a vreg op like 1,024 elements of it: the same order as a FLOP.
        vector = (self.vpu_ops + self.eup_ops) * 1024
        return (
            self.bf16_flops + self.int8_flops + self.dma_read_bytes + self.dma_write_bytes + vector
        )


_VECTOR_FIELDS = ("vpu_ops", "eup_ops", "vpu_ops_packed", "eup_ops_packed")
