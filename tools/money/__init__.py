"""What a run costs and what it will cost: HF's bill, the ceiling, the plan, the calibration."""
