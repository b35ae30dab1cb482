from tests.hostile.cases import Candidate

LEGIT: list[Candidate] = []
