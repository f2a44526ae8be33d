"""`agentdata filter`: profile the student, keep a pass-rate band, select a diverse pool, export it."""
