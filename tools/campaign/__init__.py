"""Campaigns: several runs (models × agents) served once per distinct server, benched within one
sandbox budget, under one MAX_COST, ending in one comparison (docs/campaigns.md).

campaign_file (campaigns/<name>.env, read as data), campaign_runs (each run's server command,
the groups that share a server, the trials-at-once budget and its split), campaign_state
(campaign.json and the campaign's lock), campaign_spend (one ceiling over every run's spend),
campaign_supervisor (make campaign: serve, bench, stop, resume), campaign_schedule (make plan
CAMPAIGN=…), campaign_print (the dry run and the verbs that show), campaign (the command line).
"""
