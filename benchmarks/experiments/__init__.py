"""One-off measurements of issue 38 (many tenants in one store), on the tenants bench store
(`MEMROUTE_HOME` holding it); recorded here before they leave the tree."""
