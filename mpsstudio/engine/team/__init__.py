"""A team's history on the tracking server it already runs: runs pushed to an MLflow tracking server through its REST
API (push.py), pulled back from it into the local history (pull.py), waiting in the history's queue while the server
does not answer; the figures in Bencher's metric format for thresholds in CI (bmf.py). No Qt, no torch, no mlflow
package: the REST API is plain HTTP (server.py), which the app carries in the standard library."""
