"""What runs on the workstations, inside each job and beside HTCondor: the launcher, the job's
helper module, dataset delivery, the environment cache and its keeper. Standard library only,
run as scripts from the job's helper folder (or the execute-node kit's), so each module
imports the others by their bare names; the portal imports them as jobs.runtime.*."""
