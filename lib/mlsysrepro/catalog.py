"""The collection's papers: notebook, figures and paper module.

Each entry is the contract a paper's notebook fulfils: the tests run the notebook at
``scale=smoke`` and check that its ``results.json`` lists every figure declared here and judges
every claim its paper module declares.

Each entry points to its paper module, ``mlsysrepro.papers.<name>`` (:attr:`Paper.module_name`): the paper's
presets, declared claims (``CLAIMS``), experiments and claim measurements. A planned paper's module is where
its issue puts them. Where a paper stands is computed from its verdicts (:func:`.reproduction.status`).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from .core import paths


@dataclass(frozen=True)
class Paper:
    name: str  # short name: notebooks/<name>.ipynb, figures/<name>/, mlsysrepro.papers.<name>
    title: str
    venue: str
    link: str
    theme: str
    figures: tuple[str, ...] = ()
    is_paper: bool = field(default=True)

    @property
    def module_name(self) -> str:
        """``mlsysrepro.papers.<name>`` (the template's is ``mlsysrepro.papers.template``)."""
        return f"mlsysrepro.papers.{self.name.lstrip('_')}"

    def module(self) -> ModuleType:
        """The paper module, imported (a planned paper has none yet: ModuleNotFoundError)."""
        return importlib.import_module(self.module_name)

    @property
    def notebook(self) -> Path:
        return paths.REPO_ROOT / "notebooks" / f"{self.name}.ipynb"

    def results_path(self, scale: str = paths.COMMITTED_SCALE) -> Path:
        return paths.output_dir(self.name, scale) / "results.json"



TEMPLATE = Paper(
    name="_template",
    title="Template: mini-batch gradient noise falls as 1/B",
    venue="(convention check, not a paper)",
    link="docs/NOTEBOOK_GUIDE.md",
    theme="template",
    figures=("fig1_grad_variance_vs_batch",),
    is_paper=False,
)

PAPERS: tuple[Paper, ...] = (
    Paper("llcg", "Learn Locally, Correct Globally: A Distributed Algorithm for Training Graph Neural Networks",
          "ICLR 2022", "https://arxiv.org/abs/2111.08202", "Graph learning",
          figures=("fig2_psgd_vs_ggs", "fig4_val_vs_rounds", "fig4_train_loss_vs_rounds", "fig4_val_vs_bytes",
                   "fig4_gap_vs_label_skew", "table1_models", "fig5_local_steps", "fig6_correction_neighbours", "fig7_fanout_by_server_steps",
                   "figA_growing_local_steps", "engines_serial_vs_distributed")),
    Paper("mvs_gnn", "Minimal Variance Sampling with Provable Guarantees for Fast Training of Graph Neural Networks",
          "KDD 2020", "https://arxiv.org/abs/2006.13866", "Graph learning",
          figures=("fig2_grad_variance", "fig2_loss_and_score", "fig2_shared_parameters", "fig2_staleness",
                   "rule_of_thumb", "error_vs_step", "fig4_mvs_vs_uns", "fig3_inner_steps", "table3_score_vs_batch_size", "table4_time_breakdown",
                   "scaling_sampler_throughput")),
    Paper("baklava", "BaKlaVa: Budgeted Allocation of KV Cache for Long-context Inference",
          "arXiv 2025", "https://arxiv.org/abs/2502.13176", "Transformer inference",
          figures=("importance_heatmap", "heuristic_vs_ablation", "budgets_at_70", "quality_vs_compression",
                   "needle_heatmap", "memory_and_speed", "claims_power")),
    Paper("asymvlm", "AsymVLM: Asymmetric Token Pruning for Efficient Vision-Language Model Inference",
          "arXiv 2026", "https://arxiv.org/abs/2605.29535", "Transformer inference",
          figures=("data_examples", "accuracy_vs_flops", "main_table", "budget_histogram", "text_eviction",
                   "ablations", "latency_vs_flops")),
    Paper("dlrm_gpu", "Pushing the Performance Envelope of DNN-based Recommendation Systems Inference on GPUs",
          "MICRO 2024", "https://arxiv.org/abs/2410.22249", "Recommendation",
          figures=("trace_reuse", "cpu_stage", "sensitivity", "occupancy", "l2_pinning", "optimisations")),
    Paper("pifs_rec", "PIFS-Rec: Process-In-Fabric-Switch for Large-Scale Recommendation System Inferences",
          "MICRO 2024", "https://arxiv.org/abs/2409.16633", "Recommendation",
          figures=("host_anchor", "characterisation", "breakdown", "comparison", "ablation", "scalability",
                   "assumption_buffer_mib", "assumption_device_link_lanes", "assumption_beacon_adder_gb_s",
                   "assumption_hotness_window", "assumption_hotness_pinned_share")),
    Paper("grad_sparsity", "Exploiting Activation based Gradient Output Sparsity to Accelerate Backpropagation in CNNs",
          "arXiv 2021", "https://arxiv.org/abs/2109.07710", "Training efficiency",
          figures=("sparsity_over_training", "macs_saved", "speedups", "cpu_data_gradient", "correlation")),
    Paper("structured_dropout",
          "Structured in Space, Randomized in Time: Leveraging Dropout in RNNs for Efficient Training",
          "NeurIPS 2021", "https://arxiv.org/abs/2106.12089", "Training efficiency",
          figures=("fig1_mask_cases", "stage_breakdown", "speedup_vs_p", "kernels", "epoch_time_by_batch",
                   "accuracy_by_mode", "convergence", "claims_power")),
    Paper("ddl_stalls",
          "Analysis of Distributed Deep Learning in the Cloud (Stash: stall-centric characterization of cloud VMs)",
          "arXiv 2022", "https://arxiv.org/abs/2208.14344", "Cloud and clusters",
          figures=("hook_calibration", "stall_breakdown", "interconnect_vs_workers", "network_stall",
                   "time_cost_per_epoch", "throughput", "macroscopic_fit", "recommendation",
                   "assumption_gpu_efficiency", "assumption_network_efficiency")),
    Paper("dally", "GPU Cluster Scheduling for Network-Sensitive Deep Learning (Dally)",
          "arXiv 2024", "https://arxiv.org/abs/2401.16492", "Cloud and clusters",
          figures=("delay_example", "makespan_jct_by_trace", "cdfs", "utilisation_over_time", "placement_spread",
                   "sweeps", "delay_timers", "simulator_speed", "assumption_lease_share")),
    Paper("cocktail", "Cocktail: A Multidimensional Optimization for Model Serving in Cloud",
          "NSDI 2022", "https://arxiv.org/abs/2106.05345", "Cloud and clusters",
          figures=("zoo", "cost", "models_per_query", "latency_cdf", "target_attainment", "vms_over_time",
                   "sampling_interval", "revocations", "predictors", "ablation", "assumption_slot_speed",
                   "assumption_clipper_pool", "assumption_prune_margin", "assumption_infaas_manager",
                   "assumption_models_per_vm")),
)


def by_name(name: str) -> Paper:
    for paper in (*PAPERS, TEMPLATE):
        if paper.name == name:
            return paper
    raise KeyError(f"no paper named {name!r}; known: {[p.name for p in (*PAPERS, TEMPLATE)]}")
