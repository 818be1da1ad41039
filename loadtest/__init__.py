"""Load testing, a product of its own: a client that speaks Streamlit's websocket protocol (load_client), the
capacity of one server against the reference page (capacity, reference_page), replicas behind HAProxy (replicas),
the class poll across replicas (class_poll), the training queue (training_queue), the hostile-client probe
(hostile_probe), memory under many sessions (memory) and a small browser run (load). Tested by tests/deployment/;
run by `python -m bench.run` with the micro-benchmarks. Methodology and figures: bench/README.md.
"""
