"""Hidden cases, one module per lesson topic; importing a module registers its exercises."""
