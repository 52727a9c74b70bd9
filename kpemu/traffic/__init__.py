"""Real traffic: a small server in every pod, clients in the source namespace, the flow runner."""
