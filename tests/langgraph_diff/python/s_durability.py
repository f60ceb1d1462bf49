"""(scenarios to come)"""
