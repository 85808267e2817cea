"""`nightshift`: the command-line client of Nightshift's REST API. It never imports Django."""
