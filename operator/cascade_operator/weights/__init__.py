"""The weight-moving half of the operator: who holds a deployment's weights and how
new instances get them.

    driver.py     I/O glue: gather worker statuses, nodes, plans; apply decisions
    lifecycle.py  decide_plans: the ScalePlan lifecycle, one tick        (pure)
    decision.py   what the lifecycle reads and decides (data)
    starts.py     new plans: the first for targets that answer, follow-ups (pure)
    followup.py   follow-up now or wait for the running plan: the rule    (pure)
    start_delay.py a plan's first target answering -> its first byte      (pure)
    pool.py       decide_pool: holders, sources, host copies, who loads   (pure)
    targets.py    who a new plan is for, and the planner call             (pure)
    progress.py   a running plan's status, its verdict, the write throttle (pure)
    plans.py      ScalePlan objects: the typed view, derived names         (pure)
    orders.py     typed orders to workers' control APIs                   (pure)
    motion.py     when to poll fast, when a storage load is under way     (pure)
    workers.py    a worker as these decisions see it: pod + its status    (pure)
"""
