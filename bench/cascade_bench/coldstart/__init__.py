"""`cascade bench coldstart`: from the scale decision to the first token, stage by stage.

Issue 12's benchmark. Each mode is one ModelDeployment in a fresh namespace with its own
operator; the bench waits for the mode's starting point (nothing, a host copy, a serving
instance), writes the scale through /scale (the decision), waits for the new pod to be
Ready, asks it for one token and reads the new instance's start-up stages from
status.instances[].startup. `modes` says what each mode's deployment is (pure),
`report` makes the document, the goals and the table (pure), `plot` the stacked-stage
PNG, `run` does the I/O.
"""
