"""What leaves the lab with a set: its dataset card and provenance, secret redaction, the push to the Hub."""
