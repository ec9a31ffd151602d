"""Ensemble model serving: serves Cocktail, "A Multidimensional Optimization for Model Serving in Cloud"
(Gunasekaran et al., NSDI 2022).

Public entry points:

- :func:`.zoo.build_zoo` — classifiers of different cost and accuracy trained on real digits, their validation and
  test predictions, and their measured latency per batch (:class:`.zoo.Zoo`);
- :func:`.ensemble.weighted_vote`, :class:`.ensemble.Voter` — weighted majority voting with per-class weights and a
  stated tie rule; :func:`.ensemble.select_greedy` (Cocktail), :func:`.ensemble.select_most_accurate` (InFaaS as
  Cocktail's artifact runs it) and :func:`.ensemble.select_cheapest` (as the INFaaS paper states it),
  :func:`.ensemble.prune_once` (the artifact's guarded pruning);
- :func:`.replay.schedule` and :func:`.replay.correct_counts` — which ensemble serves each window, and how many of
  its answers were right, from real predictions;
- :func:`.predictors.make_predictor` — EWMA, Holt-Winters, LSTM: ``fit(history)``, ``forecast(series, horizon)``;
- :func:`.traces.per_second_arrivals` — requests per second shaped by a real trace (:func:`.traces.daily_shape`),
  and :func:`.traces.load_wikipedia_pageviews` for the real pageview dumps;
- :func:`.fleet.vm_types`, :func:`.fleet.packed`, :func:`.fleet.cheapest`, :func:`.fleet.billed` — VMs, their shares
  when models are packed, MArk's choice, per-second billing;
- :func:`.batching.latency_table` — the latency of servers that batch what is queued, per model and load;
- :func:`.policies.make_policy` — InFaaS, Clipper, Clipper-X, Cocktail as flags over one simulator;
- :func:`.simulator.simulate` -> :class:`.simulator.Run`, :func:`.simulator.check_invariants`,
  :func:`.metrics.summary`; :func:`.reference.per_request_waits` and :func:`.reference.per_request_batched_latency`,
  the per-request queues it is checked against.

Cocktail's presets and experiments are :mod:`mlsysrepro.papers.cocktail`.
"""
