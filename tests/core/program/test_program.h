#pragma once
// The Qt Test class of core/program (declared in a header: moc cannot lex the JSON raw strings of
// test_program.cpp).
#include <QObject>

class TestProgram : public QObject {
  Q_OBJECT

 private slots:
  void parsesTheDocumentedShape();
  void constantsKeepIntAndFloatApart();
  void structuralErrors();
  void unknownOpIsAFindingNotAnError();
  void pruningAndProgress();
  void inputErrors();
  void opFailureNamesNodeAndOp();
  void cancellation();
  void intervalDomainAndStartNode();
  void firstOrderAdjointsAndBudget();
  void adjointLocalErrorInBothReversePasses();
  void probabilisticTermCoversRepeatedValues();
  void exactOperationsOnlyOnExactlyHeldOperands();
};
