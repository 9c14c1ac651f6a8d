"""What leaves the machine: the leaderboard's rules, the submission, the Hub, the staged checkout."""
