"""The one walking and matching engine behind glob, grep and their Jianmu relatives."""
