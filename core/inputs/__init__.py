"""What attention is computed on: the sources' sentences and embeddings, the device, and real models' heads."""
