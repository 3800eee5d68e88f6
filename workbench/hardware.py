"""Accelerator specs: the one table behind MFU (model.train, the benches) and the napkin math (model.costs.accounting).

Datasheets (dense bf16 = half the "with sparsity" figure; NVLink = half the bidirectional total):
- H100 SXM5 80 GB: NVIDIA H100 Tensor Core GPU datasheet (2023): 989 TFLOP/s bf16, 3.35 TB/s HBM3, NVLink
  900 GB/s; DGX H100: 8x ConnectX-7 400 Gb/s NDR InfiniBand, one per GPU (50 GB/s). H100 PCIe: 756 TFLOP/s.
- H200 SXM 141 GB: NVIDIA H200 datasheet (2024): same compute as H100, 4.8 TB/s HBM3e, NVLink 900 GB/s.
- A100 SXM 80 GB: NVIDIA A100 datasheet (2021): 312 TFLOP/s bf16, 2,039 GB/s, NVLink 600 GB/s; DGX A100:
  8x ConnectX-6 200 Gb/s HDR InfiniBand (25 GB/s per GPU).
- B200: NVIDIA DGX B200 datasheet (2024): 1,440 GB for 8 GPUs, i.e. 180 GB usable per GPU (the chip has
  192 GB), 8 TB/s HBM3e, NVLink 5 1.8 TB/s, 8x ConnectX-7 400 Gb/s; HGX B200: 4.5 PFLOP/s fp16/bf16 with
  sparsity, 2.25 PFLOP/s dense.
- L4 (121 TFLOP/s) and A10 (125 TFLOP/s): NVIDIA datasheets; only their peak is tabled (no multi-GPU specs).
"""

from __future__ import annotations

from dataclasses import dataclass

from workbench.params import REQUIRED, Checked, setting


@dataclass(frozen=True)
class Hardware(Checked):
    """One accelerator in its node. Bandwidths are bytes/s per GPU in one direction."""

    name: str = setting(REQUIRED, "the accelerator's name")
    peak_flops: float = setting(REQUIRED, "dense bf16 FLOP/s (no sparsity)", above=0)
    hbm_bytes: float = setting(REQUIRED, "memory per GPU", above=0)
    hbm_bandwidth: float = setting(REQUIRED, "memory bytes/s", above=0)
    intra_node_bandwidth: float = setting(REQUIRED, "NVLink, per GPU per direction, usable by collectives", above=0)
    inter_node_bandwidth: float = setting(REQUIRED, "InfiniBand NIC per GPU per direction", above=0)
    gpus_per_node: int = setting(8, "GPUs in one node", at_least=1)

    def link_bandwidth(self, group_size: int) -> float:
        """Bandwidth of a ring over ``group_size`` consecutive ranks: NVLink inside a node, else the NIC."""
        return self.intra_node_bandwidth if group_size <= self.gpus_per_node else self.inter_node_bandwidth


HARDWARE: dict[str, Hardware] = {
    "h100": Hardware("H100 SXM 80GB", 989e12, 80e9, 3.35e12, 450e9, 50e9),
    "h200": Hardware("H200 SXM 141GB", 989e12, 141e9, 4.8e12, 450e9, 50e9),
    "a100": Hardware("A100 SXM 80GB", 312e12, 80e9, 2.039e12, 300e9, 25e9),
    "b200": Hardware("B200 180GB", 2.25e15, 180e9, 8e12, 900e9, 50e9),
}

# Dense bf16 peak FLOP/s by a substring of torch.cuda.get_device_name(); the first match wins, so the
# PCIe H100 comes before the SXM one.
PEAK_FLOPS: dict[str, float] = {
    "H100 PCIe": 756e12,
    "H100": HARDWARE["h100"].peak_flops,
    "H200": HARDWARE["h200"].peak_flops,
    "B200": HARDWARE["b200"].peak_flops,
    "A100": HARDWARE["a100"].peak_flops,
    "L4": 121e12,
    "A10": 125e12,
}


def get_hardware(name: str | Hardware) -> Hardware:
    if isinstance(name, Hardware):
        return name
    key = str(name).lower()
    if key not in HARDWARE:
        raise ValueError(f"unknown hardware {name!r}; choose from {', '.join(HARDWARE)}")
    return HARDWARE[key]


def peak_flops_of(device_name: str) -> float | None:
    """Dense bf16 peak of the GPU whose name contains a key of ``PEAK_FLOPS``; None when it is not tabled."""
    return next((flops for key, flops in PEAK_FLOPS.items() if key in device_name), None)
