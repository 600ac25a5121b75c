"""What every part of KernelWatch shares and nothing else: the error vocabulary (``errors``), the hardware table
(``hardware``) and the closed vocabularies of stored values (``vocabulary``). Standard library only, because the
benchmark harness imports them too, under a project's own interpreter (runners/harness_copy.py copies this package
beside ``runners``); the runners import nothing of ``service`` but its manifest contract
(tests/unit/test_import_contracts.py)."""
