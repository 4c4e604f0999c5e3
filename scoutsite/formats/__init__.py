"""Scout's date formats (FORMAT_MODULE_PATH): one per language, overriding Django's locale formats."""
