"""Twin: a fast, vectorized simulation of a GPU cluster with power, cooling, jobs and faults."""
