"""`tephra dashboard`: a read-only web UI and JSON API over live cluster state and the ledger.

Layout: `state` keeps a watch-fed, slimmed copy of the objects the pages show (no polling of
lists); `views` turns it into the page models (plain dicts, which are also the JSON API);
`history` reads the ledger's report views; `charts` draws them as SVG on the server; `pages`
renders HTML; `server` is the aiohttp application (GET only, loopback by default, optional
bearer token).
"""
