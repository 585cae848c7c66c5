"""Storage back ends, chosen by name through `base.open_graph_store` / `base.open_vector_store`."""
