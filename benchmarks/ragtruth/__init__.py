"""RAGTruth benchmark: sentence- and response-level faithfulness detection on real RAG answers (grouped CV)."""
